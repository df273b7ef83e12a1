#ifndef WHARF_FS_TREE_H
#define WHARF_FS_TREE_H
/* Placeholder: filled in by its module owner. */
#endif
