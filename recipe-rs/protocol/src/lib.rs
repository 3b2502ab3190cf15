//! Request conversion (filled in by the conversion work).
