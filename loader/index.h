#ifndef WHARF_LOADER_INDEX_H
#define WHARF_LOADER_INDEX_H
/* Placeholder: filled in by its module owner. */
#endif
