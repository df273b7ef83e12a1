/* Placeholder: filled in by its module owner. */
typedef int wharf_placeholder_source_gcs;
