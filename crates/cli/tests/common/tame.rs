// The plain twin of a hostile run, shared by the terminal tests of the binary's summary
// (`src/summary.rs`) and of explain, compare and gate (`tests/terminal.rs`).

use serde_json::Value;
use switchyard_model::term::{escape, is_unsafe};

/// `v` with every character a terminal would act on replaced by as many `_` as its escape
/// takes: the same run with plain names, laid out alike (a line wraps where it wrapped).
pub fn tame(v: &mut Value) {
    match v {
        Value::String(s) => {
            *s = s
                .chars()
                .map(|c| {
                    if is_unsafe(c) {
                        "_".repeat(escape(&c.to_string()).len())
                    } else {
                        c.to_string()
                    }
                })
                .collect();
        }
        Value::Array(items) => items.iter_mut().for_each(tame),
        Value::Object(fields) => fields.values_mut().for_each(tame),
        _ => {}
    }
}
