#ifndef WHARF_FS_LISTING_H
#define WHARF_FS_LISTING_H
/* Placeholder: filled in by its module owner. */
#endif
