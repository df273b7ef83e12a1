#ifndef WHARF_FS_STATS_H
#define WHARF_FS_STATS_H
/* Placeholder: filled in by its module owner. */
#endif
