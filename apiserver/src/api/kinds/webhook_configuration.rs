//! Validating and mutating webhook configurations: their match conditions must be bounded now,
//! since every later write evaluates them
//! ([`crate::api::admission::conditions::configuration_problems`]).

use serde_json::Value;

use super::strategy::KindStrategy;
use crate::api::{admission::conditions, field_errors::FieldError, objects::KindRules};

pub(super) struct WebhookConfiguration;

impl KindRules for WebhookConfiguration {}

impl KindStrategy for WebhookConfiguration {
    fn validate(&self, obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        conditions::configuration_problems(obj)
    }
}
