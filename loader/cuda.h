#ifndef WHARF_LOADER_CUDA_H
#define WHARF_LOADER_CUDA_H
/* Placeholder: filled in by its module owner. */
#endif
