#ifndef WHARF_LOADER_WORKERS_H
#define WHARF_LOADER_WORKERS_H
/* Placeholder: filled in by its module owner. */
#endif
