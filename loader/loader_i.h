#ifndef WHARF_LOADER_LOADER_I_H
#define WHARF_LOADER_LOADER_I_H
/* Placeholder: filled in by its module owner. */
#endif
