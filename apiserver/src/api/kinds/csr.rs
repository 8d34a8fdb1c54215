//! CertificateSigningRequests: the server records who asked ([`crate::api::csr::prepared`]);
//! `approval` sets the `Approved`/`Denied` conditions ([`approval`]).

mod approval;

use serde_json::Value;

use super::strategy::{Hook, KindStrategy, Write, done};
use super::subresource::Subresource;
use crate::api::{csr, objects::KindRules, status::ApiError};

pub(super) struct Csr;

impl KindRules for Csr {}

impl KindStrategy for Csr {
    fn subresource(&self, sub: &str) -> Option<Subresource> {
        (sub == "approval").then_some(approval::serve as Subresource)
    }

    fn prepare_for_create<'a>(&'a self, w: &'a Write<'a>, obj: &'a mut Value) -> Hook<'a> {
        let requested = crate::api::objects::name_of(obj).to_owned();
        let prepared = csr::prepared(std::mem::take(obj), &w.ctx.user);
        match prepared {
            Ok(p) => *obj = p,
            Err(e) => {
                return Box::pin(std::future::ready(Err(ApiError::invalid(
                    &w.def.kind,
                    &requested,
                    e.to_string(),
                ))));
            }
        }
        done()
    }
}
