#![warn(missing_docs)]
//! The Kubernetes REST toolkit: the wire layer a Kubernetes-style API server needs, with no
//! storage behind it. An embedded cluster (the gateway, over SQLite) and an extension API
//! server (the worker, over a real cluster) both serve with it.
//!
//! - [`path`]: what a request path names (discovery document, OpenAPI, resource, subresource).
//! - [`negotiate`]: which representation a client asked for (JSON, YAML, `Table`,
//!   `PartialObjectMetadata`, aggregated discovery, gnostic protobuf).
//! - [`status`]: `Status` error bodies; [`response`]: plain JSON answers.
//! - [`resource`]: a served resource as data (verbs, scope, short names, categories, printer
//!   columns, selectable fields, subresources), the built-in kinds, and CRDs' kinds.
//! - [`discovery`] (legacy and aggregated v2, the server's [`discovery::ServerVersion`]) and
//!   [`openapi`] (v2 as JSON or gnostic protobuf via [`openapi_proto`], v3) built from those.
//! - [`documents`]: health, `/version`, discovery and OpenAPI answered from the descriptions.
//! - [`table`] with its [`columns`]: [`jsonpath`] for CRDs' printer columns and [`printers`]
//!   for the built-in kinds' (kube-apiserver's columns, computed from the object).
//! - [`selectors`] (label and field); [`list`] with [`pagination`] (`limit`/`continue`);
//!   [`watch`] event framing and bookmarks.
//! - [`schema`]: structural-schema defaulting and pruning; [`protobuf`]: Kubernetes protobuf
//!   of every built-in kind (request bodies, and answers for protobuf-only clients).
//! - [`builtin_schemas`]: the OpenAPI schemas of built-in kinds, generated from k8s-openapi's
//!   types (the `schema` feature, on in the tests) into a committed document that the binary
//!   reads, held as a [`kind_schema::Schema`] built on first use; [`definitions`]: `$ref`s
//!   within such a definitions document.
//!
//! - [`bounded`]: request documents parsed with their expanded size and nesting bounded;
//!   [`unsupported_value`]: a query parameter outside its values.
//!
//! Certificates and listeners are the `gpustack-serving` crate's (the node agents serve with
//! it, without this toolkit). Deliberately absent: any store, any Kubernetes client (a test
//! checks the dependency tree).

pub mod bounded;
pub mod builtin_schemas;
pub mod columns;
pub mod definitions;
pub mod discovery;
pub mod documents;
pub mod jsonpath;
pub mod kind_schema;
pub mod list;
pub mod negotiate;
pub mod openapi;
pub mod openapi_proto;
pub mod pagination;
pub mod path;
pub mod printers;
pub mod protobuf;
pub mod quantity;
pub mod resource;
pub mod response;
pub mod schema;
pub mod selectors;
pub mod status;
pub mod table;
pub mod unsupported_value;
pub mod watch;
