#ifndef WHARF_FS_PREFETCH_H
#define WHARF_FS_PREFETCH_H
/* Placeholder: filled in by its module owner. */
#endif
