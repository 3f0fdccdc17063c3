//! HTML escaping of everything that comes from the target: symbol names, command lines,
//! thread names, paths.

use std::fmt;

/// Escapes text for an HTML text node or a quoted attribute value (`"` and `'` included), and
/// for SVG text in an HTML document.
pub fn html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `format!("{}", Esc(s))` escapes `s` like [`html`]; handy inside `write!`.
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&html(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            html(r#"<script>alert("x&y's")</script>"#),
            "&lt;script&gt;alert(&quot;x&amp;y&#39;s&quot;)&lt;/script&gt;"
        );
        assert_eq!(Esc("a<b").to_string(), "a&lt;b");
        assert_eq!(html("plain µs"), "plain µs");
    }
}
