//! What every vendor binding shares: loading a management library and resolving its symbols
//! ([`loader`]), the words for what went wrong ([`errors`]) and reading the fixed C character
//! arrays the libraries fill ([`text`]).
//!
//! Each vendor keeps its own symbol table, prototypes and layouts in its `vendors/<v>/<lib>.rs`;
//! this module holds nothing vendor-specific.

pub mod errors;
pub mod loader;
pub mod text;

pub use errors::{CallError, OpenError, check, present};
pub use text::c_text;
