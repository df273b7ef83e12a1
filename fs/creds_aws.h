#ifndef WHARF_FS_CREDS_AWS_H
#define WHARF_FS_CREDS_AWS_H
/* Placeholder: filled in by its module owner. */
#endif
