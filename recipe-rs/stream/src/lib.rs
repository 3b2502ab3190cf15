//! Output parsing and protocol chunks (filled in by the streaming work).
