//! Strict request-field checks shared by the contracts' validators: the field set of an
//! object (unknown and missing fields) and the non-empty string rule. Each contract words its
//! own envelope (`invalid`) around the problems these return.

use serde_json::{Map, Value};

/// `field` or `fields`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_string()
    } else {
        format!("{word}s")
    }
}

/// A JSON value's type as the validators name it.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// How a field-set check treats an object.
pub struct FieldSet<'a> {
    pub required: &'a [&'a str],
    pub optional: &'a [&'a str],
    /// Keys that are neither reported nor listed (the `thread` tool's `action`).
    pub ignored: &'a [&'a str],
    /// Says where the allowed list applies: `allowed` or `allowed for start`.
    pub allowed_label: &'a str,
    /// A required field set to `null` counts as missing.
    pub null_is_missing: bool,
}

impl FieldSet<'_> {
    /// The problems with `obj`'s keys: unexpected fields (with the allowed list), then missing
    /// required ones. Empty when the set is right.
    pub fn problems(&self, obj: &Map<String, Value>) -> Vec<String> {
        let unexpected: Vec<&str> = obj
            .keys()
            .map(String::as_str)
            .filter(|k| {
                !self.ignored.contains(k)
                    && !self.required.contains(k)
                    && !self.optional.contains(k)
            })
            .collect();
        let missing: Vec<&str> = self
            .required
            .iter()
            .copied()
            .filter(|k| match obj.get(*k) {
                None => true,
                Some(v) => self.null_is_missing && v.is_null(),
            })
            .collect();
        let mut problems = Vec::new();
        if !unexpected.is_empty() {
            let allowed: Vec<&str> = self.required.iter().chain(self.optional).copied().collect();
            let allowed = if allowed.is_empty() {
                "none".to_string()
            } else {
                allowed.join(", ")
            };
            problems.push(format!(
                "unexpected {} {} ({}: {allowed})",
                plural(unexpected.len(), "field"),
                unexpected.join(", "),
                self.allowed_label
            ));
        }
        if !missing.is_empty() {
            problems.push(format!(
                "missing required {} {}",
                plural(missing.len(), "field"),
                missing.join(", ")
            ));
        }
        problems
    }
}

/// A non-empty string from `value` (absent: `None`); anything else adds a problem to `errors`.
pub fn non_empty_text(
    value: Option<&Value>,
    key: &str,
    errors: &mut Vec<String>,
) -> Option<String> {
    match value {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        Some(Value::String(_)) => {
            errors.push(format!("{key} must be a non-empty string"));
            None
        }
        Some(other) => {
            errors.push(format!("{key} must be a string, got {}", type_name(other)));
            None
        }
    }
}
