#ifndef WHARF_LOADER_SAMPLER_H
#define WHARF_LOADER_SAMPLER_H
/* Placeholder: filled in by its module owner. */
#endif
