//! yq's YAML output, as kislyuk's yq writes it with PyYAML.

use std::io::{self, Write};

/// A scalar as PyYAML writes it plainly or quoted (serde_yaml's quoting rules agree for the
/// common cases).
fn yaml_scalar(v: &serde_json::Value) -> String {
    // jq prints integral floats as integers (3.0 is 3); yq's YAML keeps jq's numbers.
    if let serde_json::Value::Number(n) = v
        && let Some(f) = n.as_f64()
        && n.is_f64()
        && f.fract() == 0.0
        && f.abs() < 1e17
    {
        return format!("{}", f as i64);
    }
    serde_yaml::to_string(v)
        .unwrap_or_default()
        .trim_end_matches('\n')
        .to_string()
}

/// Block-style YAML as kislyuk's yq writes it with PyYAML: two-space indents, sequences
/// indented under their key, `{}`/`[]` for empty collections.
fn yaml_block(v: &serde_json::Value, indent: usize, out: &mut String) {
    use serde_json::Value;
    let pad = " ".repeat(indent);
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, val) in m {
                out.push_str(&pad);
                out.push_str(&yaml_scalar(&Value::String(k.clone())));
                out.push(':');
                match val {
                    Value::Object(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml_block(val, indent + 2, out);
                    }
                    Value::Array(c) if !c.is_empty() => {
                        out.push('\n');
                        yaml_block(val, indent + 2, out);
                    }
                    _ => {
                        out.push(' ');
                        out.push_str(&yaml_inline(val));
                        out.push('\n');
                    }
                }
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for item in items {
                out.push_str(&pad);
                out.push_str("- ");
                match item {
                    Value::Object(c) if !c.is_empty() => {
                        let mut inner = String::new();
                        yaml_block(item, indent + 2, &mut inner);
                        out.push_str(inner.trim_start_matches(' '));
                    }
                    Value::Array(c) if !c.is_empty() => {
                        let mut inner = String::new();
                        yaml_block(item, indent + 2, &mut inner);
                        out.push_str(inner.trim_start_matches(' '));
                    }
                    _ => {
                        out.push_str(&yaml_inline(item));
                        out.push('\n');
                    }
                }
            }
        }
        _ => {
            out.push_str(&pad);
            out.push_str(&yaml_inline(v));
            out.push('\n');
        }
    }
}

fn yaml_inline(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(_) => "{}".into(),
        serde_json::Value::Array(_) => "[]".into(),
        _ => yaml_scalar(v),
    }
}

/// `yq -y`: the results as one YAML stream, as PyYAML's dump_all writes it: `---` between
/// documents (`--- x` for a scalar), and `...` after a final plain scalar.
pub fn write_yaml_stream(out: &mut impl Write, docs: &[serde_json::Value]) -> io::Result<()> {
    let mut text = String::new();
    for (k, d) in docs.iter().enumerate() {
        let scalar = !matches!(d, serde_json::Value::Object(m) if !m.is_empty())
            && !matches!(d, serde_json::Value::Array(a) if !a.is_empty());
        let mut body = String::new();
        yaml_block(d, 0, &mut body);
        if k > 0 {
            text.push_str(if scalar { "--- " } else { "---\n" });
        }
        text.push_str(&body);
        if k + 1 == docs.len() && scalar {
            text.push_str("...\n");
        }
    }
    out.write_all(text.as_bytes())
}
