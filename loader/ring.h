#ifndef WHARF_LOADER_RING_H
#define WHARF_LOADER_RING_H
/* Placeholder: filled in by its module owner. */
#endif
