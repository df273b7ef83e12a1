#ifndef WHARF_FS_CREDS_GCP_H
#define WHARF_FS_CREDS_GCP_H
/* Placeholder: filled in by its module owner. */
#endif
