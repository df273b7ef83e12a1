#ifndef WHARF_LOADER_HINTS_H
#define WHARF_LOADER_HINTS_H
/* Placeholder: filled in by its module owner. */
#endif
