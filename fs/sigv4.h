#ifndef WHARF_FS_SIGV4_H
#define WHARF_FS_SIGV4_H
/* Placeholder: filled in by its module owner. */
#endif
