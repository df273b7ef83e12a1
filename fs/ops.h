#ifndef WHARF_FS_OPS_H
#define WHARF_FS_OPS_H
/* Placeholder: filled in by its module owner. */
#endif
