//! Names from the target, made safe for a terminal.
//!
//! Thread names (the target sets its own with `prctl(PR_SET_NAME)`), function names read from
//! its memory (a Python function's name), its command line and the paths it maps are all the
//! target's to choose. Written raw to a terminal, an ESC starts a control sequence (a window
//! title, a cleared screen, colours), a CR or LF forges a line of our own output, and a bidi
//! override reorders the rest of the line. [`escape`] is what the HTML escaping is to the
//! page: every line the terminal gets passes each such name through it, and the run file keeps
//! the names as recorded.
//!
//! The escapes are Rust's own spelling (`\n`, `\x1b`, `\u{202e}`), and a backslash is written
//! `\\`: every escaped text reads back to exactly one name, so a thread really named `\x1b`
//! (four printable characters) shows as `\\x1b` and cannot pass for one that held an ESC.
//! Backslashes are rare in names (no symbol and no Python identifier has one), so this costs
//! ordinary output nothing.

use std::{borrow::Cow, fmt::Write as _};

/// Whether `c` does something to a terminal or its line instead of showing as itself:
/// - the C0 controls (NUL to US: ESC, CR, LF, TAB, BEL…), DEL and the C1 controls
///   (U+0080–U+009F, among them CSI U+009B, which some terminals take for `ESC [`);
/// - the bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) and the
///   invisible direction marks (U+061C, U+200E, U+200F), which reorder what follows them;
/// - the line and paragraph separators (U+2028, U+2029), line breaks to some readers.
pub fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `s` as a terminal may show it: printable text as it is (any script: `café`, `工作线程`),
/// each [unsafe](is_unsafe) character as a visible escape (`\n`, `\r`, `\t`, `\x1b`,
/// `\u{9b}`, `\u{202e}`) and a backslash as `\\`. Borrowed when nothing needed escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c == '\\' || is_unsafe(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => out.push_str(r"\\"),
            '\n' => out.push_str(r"\n"),
            '\r' => out.push_str(r"\r"),
            '\t' => out.push_str(r"\t"),
            c if c.is_ascii() && is_unsafe(c) => {
                let _ = write!(out, r"\x{:02x}", u32::from(c));
            }
            c if is_unsafe(c) => {
                let _ = write!(out, r"\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_text_passes_untouched_and_borrowed() {
        for s in [
            "",
            "worker-3",
            "switchyard_demo::hog_spin",
            "<img src=x>",
            "café",
            "工作线程",
            "עברית",
            "emoji 🦀",
            "tab-free ~ [x] {y}",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(b) if b == s), "{s:?}");
        }
    }

    #[test]
    fn controls_become_visible_escapes() {
        assert_eq!(escape("\x1b]0;pwned\x07"), r"\x1b]0;pwned\x07");
        assert_eq!(
            escape("handle\r\n  1. [fake] forged line"),
            r"handle\r\n  1. [fake] forged line"
        );
        assert_eq!(escape("a\tb\0c\x7fd"), r"a\tb\x00c\x7fd");
        assert_eq!(escape("\x1b[2J"), r"\x1b[2J");
        // C1: CSI, NEL.
        assert_eq!(escape("\u{9b}31m\u{85}"), r"\u{9b}31m\u{85}");
        // Bidi overrides, isolates and marks; line and paragraph separators.
        assert_eq!(escape("evil\u{202e}gnp.exe"), r"evil\u{202e}gnp.exe");
        assert_eq!(escape("\u{2066}x\u{2069}"), r"\u{2066}x\u{2069}");
        assert_eq!(escape("\u{200f}\u{061c}"), r"\u{200f}\u{61c}");
        assert_eq!(escape("a\u{2028}b\u{2029}"), r"a\u{2028}b\u{2029}");
    }

    #[test]
    fn backslash_is_doubled_so_escapes_are_unambiguous() {
        assert_eq!(escape(r"C:\x"), r"C:\\x");
        // A name that spells an escape does not read as the character it spells.
        assert_ne!(escape(r"\x1b"), escape("\x1b"));
        assert_eq!(escape(r"\x1b"), r"\\x1b");
    }

    #[test]
    fn nothing_unsafe_survives_any_character() {
        // Every character up to U+2FFF (the controls, the bidi formats, the separators among
        // them) in one text: none of them is left in the output, nor any byte under 0x20.
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        let out = escape(&all);
        assert!(!out.chars().any(is_unsafe), "{out}");
        assert!(!out.bytes().any(|b| b < 0x20 || b == 0x7f));
    }
}
