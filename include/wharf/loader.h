#ifndef WHARF_INCLUDE_WHARF_LOADER_H
#define WHARF_INCLUDE_WHARF_LOADER_H
/* Placeholder: filled in by its module owner. */
#endif
