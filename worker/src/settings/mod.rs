//! Settings (`gpustack.ai/v1` `Setting`): the catalog, value checks, the API objects, and the
//! Secret they are stored in.

pub mod catalog;
pub mod store;
pub mod validate;
pub mod view;
