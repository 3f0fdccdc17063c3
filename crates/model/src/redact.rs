//! Secrets out of a command line before it is recorded.
//!
//! A run keeps its target's command line (`meta.command`), and the report, the comparison,
//! pprof comments and exported profiles all show it: a `--password=hunter2` there is a
//! password in every file that leaves the host. [`command`] replaces what looks like a secret
//! by [`REDACTED`], keeping the flag that names it, so the line still says what ran:
//!
//! - the value of a flag whose name says secret (`--password=x`, `--password x`,
//!   `-db-password x` as Go's flag package spells it, `--apiKey x`, `-Dstore.password=x`);
//! - `KEY=value` words whose key says secret (`PGPASSWORD=x`, `password=x` in a libpq
//!   connection string);
//! - the password of `user:password@` in a URL, and its secret query parameters
//!   (`?access_token=x`);
//! - an `Authorization: …`-style header's value.
//!
//! An argument with spaces (`sh -c '…'`, a rewritten process title) is read as words too.
//! Flags are matched by name only: a short flag (`-p x`) means something else to every program,
//! and a secret given in one, or in a positional argument, stays.
//!
//! A name says secret when its last word (split at `-`, `_`, `.` and camelCase) is one of
//! [`SECRET_WORDS`] or ends with one of [`SECRET_ENDINGS`] (`PGPASSWORD`), and its first word
//! is not `no` (`--no-password`); `--password-file PATH` names a file, not a secret.

use std::borrow::Cow;

/// What a secret is replaced by.
pub const REDACTED: &str = "[redacted]";

/// A name whose last word is one of these names a secret.
pub const SECRET_WORDS: &[&str] = &[
    "pass",
    "pw",
    "pwd",
    "key",
    "auth",
    "cookie",
    "credential",
    "credentials",
    "creds",
];

/// A name whose last word ends with one of these names a secret (`dbpassword`, `PGPASSWORD`,
/// `authtoken`, `apikey`).
pub const SECRET_ENDINGS: &[&str] = &[
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "privatekey",
    "privkey",
    "authorization",
];

/// `argv` with its secrets replaced by [`REDACTED`].
pub fn command(argv: &[String]) -> Vec<String> {
    let mut out: Vec<String> = argv.to_vec();
    redact_words(&mut out);
    out
}

/// The words of one command line (or of one argument's text), redacted in place: flags and
/// their values, then what each word holds.
fn redact_words(words: &mut [String]) {
    let mut i = 0;
    while i < words.len() {
        match flag(&words[i]) {
            Some(Flag::WithValue(redacted)) => {
                words[i] = redacted;
                i += 1;
                continue;
            }
            Some(Flag::ValueNext) => {
                // The value is the next word, unless the next word is another flag.
                if let Some(next) = words.get_mut(i + 1)
                    && !next.starts_with("--")
                {
                    *next = REDACTED.to_string();
                    i += 2;
                    continue;
                }
            }
            Some(Flag::HeaderNext) => {
                let scheme = words.get(i + 1).is_some_and(|w| {
                    let w = w.trim_start_matches(QUOTES).to_ascii_lowercase();
                    AUTH_SCHEMES.contains(&w.as_str())
                });
                let value = i + 1 + usize::from(scheme);
                if let Some(v) = words.get_mut(value) {
                    *v = with_quotes("", &*v);
                    i = value + 1;
                    continue;
                }
            }
            None => {}
        }
        if let Cow::Owned(s) = inside(&words[i]) {
            words[i] = s;
        }
        i += 1;
    }
}

enum Flag {
    /// `--password=x`, redacted.
    WithValue(String),
    /// `--password`: its value is the next word.
    ValueNext,
    /// `Authorization:` as a word: its value is the next word, or the two next when the first
    /// is a scheme (`Bearer x`).
    HeaderNext,
}

/// Quotes a word may carry when it comes from a shell string.
const QUOTES: [char; 2] = ['\'', '"'];

/// A word that gives a secret: a secret flag (`--password=x`, `-password`), a secret
/// `KEY=value`, or a secret header (`Authorization: Bearer x`, as one word).
fn flag(word: &str) -> Option<Flag> {
    let unquoted = word.trim_start_matches(QUOTES);
    let named = unquoted.trim_start_matches('-');
    let dashes = unquoted.len() - named.len();
    if !named.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    // A header: `Authorization: Bearer x`, `X-Api-Key: x`; or its name alone, as a word of
    // a shell string (`-H "Authorization: Bearer x"`).
    if dashes == 0
        && let Some((name, value)) = named.split_once(':')
        && is_name(name)
        && is_secret(name)
    {
        let spaces = value.len() - value.trim_start().len();
        return match value[spaces..].trim_end_matches(QUOTES) {
            "" => Some(Flag::HeaderNext),
            v if v.starts_with('/') => None,
            _ => {
                let kept = &word[..word.len() - value.len() + spaces];
                Some(Flag::WithValue(with_quotes(kept, &value[spaces..])))
            }
        };
    }
    match named.split_once('=') {
        Some((name, value))
            if is_name(name) && is_secret(name) && (dashes > 0 || !value.is_empty()) =>
        {
            let kept = &word[..word.len() - value.len()];
            Some(Flag::WithValue(with_quotes(kept, value)))
        }
        None if dashes > 0 && is_name(named) && is_secret(named) => Some(Flag::ValueNext),
        _ => None,
    }
}

/// `kept`, then [`REDACTED`] in the quotes `value` opens and closes with.
fn with_quotes(kept: &str, value: &str) -> String {
    let open = value.len() - value.trim_start_matches(QUOTES).len();
    let inner = &value[open..];
    let close = &inner[inner.trim_end_matches(QUOTES).len()..];
    format!("{kept}{}{REDACTED}{close}", &value[..open])
}

/// The schemes of an `Authorization` header's value, which the credentials follow.
const AUTH_SCHEMES: [&str; 6] = ["basic", "bearer", "digest", "negotiate", "token", "apikey"];

/// A flag's, a key's or a header's name: letters, digits, `-`, `_` and `.`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Whether a name says secret (see the module's documentation).
pub fn is_secret(name: &str) -> bool {
    let words = name_words(name);
    let (Some(first), Some(last)) = (words.first(), words.last()) else {
        return false;
    };
    if first == "no" && words.len() > 1 {
        return false;
    }
    SECRET_WORDS.contains(&last.as_str()) || SECRET_ENDINGS.iter().any(|e| last.ends_with(e))
}

/// A name's words, lowercase: split at `-`, `_`, `.` and where camelCase turns upper.
fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            words.push(std::mem::take(&mut word));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words
}

/// What one word holds: URLs' passwords and secret query parameters, and, in a word with
/// spaces, its words.
fn inside(word: &str) -> Cow<'_, str> {
    let mut text = Cow::Borrowed(word);
    if text.contains("://")
        && let Some(s) = urls(&text)
    {
        text = Cow::Owned(s);
    }
    if text.contains(char::is_whitespace) {
        let spans = word_spans(&text);
        let mut words: Vec<String> = spans.iter().map(|r| text[r.clone()].to_string()).collect();
        redact_words(&mut words);
        if spans
            .iter()
            .zip(&words)
            .any(|(r, w)| text[r.clone()] != **w)
        {
            let mut out = String::with_capacity(text.len());
            let mut at = 0;
            for (r, w) in spans.iter().zip(&words) {
                out.push_str(&text[at..r.start]);
                out.push_str(w);
                at = r.end;
            }
            out.push_str(&text[at..]);
            text = Cow::Owned(out);
        }
    }
    text
}

/// Where each run of non-space characters is.
fn word_spans(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                spans.push(s..i);
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push(s..text.len());
    }
    spans
}

/// `text` with every URL's password (`scheme://user:password@host`) and secret query
/// parameters redacted; `None` when there was nothing to redact.
fn urls(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(at) = rest.find("://") {
        let start = at + 3;
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        // The URL runs to the next space or quote.
        let end = tail
            .find(|c: char| c.is_whitespace() || QUOTES.contains(&c))
            .unwrap_or(tail.len());
        let (url, after) = tail.split_at(end);
        let redacted = url_secrets(url);
        changed |= redacted != url;
        out.push_str(&redacted);
        rest = after;
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// One URL after its `scheme://`: its userinfo's password and its secret query values.
fn url_secrets(url: &str) -> String {
    let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(authority_end);
    let mut out = String::with_capacity(url.len());
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => {
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                }
                None => out.push_str(userinfo),
            }
            out.push('@');
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    let Some((before, query)) = path.split_once('?') else {
        out.push_str(path);
        return out;
    };
    out.push_str(before);
    out.push('?');
    let (query, fragment) = match query.split_once('#') {
        Some((q, f)) => (q, Some(f)),
        None => (query, None),
    };
    let params: Vec<String> = query
        .split('&')
        .map(|param| match param.split_once('=') {
            Some((k, _)) if is_secret(k) => format!("{k}={REDACTED}"),
            _ => param.to_string(),
        })
        .collect();
    out.push_str(&params.join("&"));
    if let Some(f) = fragment {
        out.push('#');
        out.push_str(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redacted(line: &[&str]) -> Vec<String> {
        command(&line.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[track_caller]
    fn check(line: &[&str], want: &[&str]) {
        assert_eq!(redacted(line), want, "{line:?}");
    }

    #[test]
    fn secret_flags_keep_their_names_and_lose_their_values() {
        check(
            &["./server", "--password=hunter2", "--port", "9000"],
            &["./server", "--password=[redacted]", "--port", "9000"],
        );
        check(
            &["./server", "--password", "hunter2", "-v"],
            &["./server", "--password", "[redacted]", "-v"],
        );
        // Go's flag package: one dash, `-flag value` or `-flag=value`.
        check(
            &[
                "./api",
                "-db-password",
                "hunter2",
                "-api_key=abc",
                "-listen",
                ":80",
            ],
            &[
                "./api",
                "-db-password",
                "[redacted]",
                "-api_key=[redacted]",
                "-listen",
                ":80",
            ],
        );
        check(
            &[
                "node",
                "app.js",
                "--apiKey",
                "abc",
                "--authToken=xyz",
                "--client-secret",
                "s",
            ],
            &[
                "node",
                "app.js",
                "--apiKey",
                "[redacted]",
                "--authToken=[redacted]",
                "--client-secret",
                "[redacted]",
            ],
        );
        check(
            &[
                "java",
                "-Djavax.net.ssl.keyStorePassword=changeit",
                "-jar",
                "a.jar",
            ],
            &[
                "java",
                "-Djavax.net.ssl.keyStorePassword=[redacted]",
                "-jar",
                "a.jar",
            ],
        );
        for name in [
            "--pass",
            "--passwd",
            "--pwd",
            "--secret",
            "--token",
            "--key",
            "--api-key",
            "--api_key",
            "--apikey",
            "--auth",
            "--credentials",
            "--private-key",
            "--passphrase",
        ] {
            check(&["x", name, "v"], &["x", name, "[redacted]"]);
            let with = format!("{name}=v");
            let want = format!("{name}=[redacted]");
            check(&["x", &with], &["x", &want]);
        }
    }

    #[test]
    fn names_that_only_mention_a_secret_are_kept() {
        for line in [
            &["docker", "login", "--password-stdin", "registry.example"][..],
            &["x", "--password-file", "/run/secrets/db"],
            &["x", "--no-password", "host"],
            &["x", "--tokenizer", "bpe"],
            &["x", "--keyspace", "k1", "--monkey", "m"],
            &["x", "--secrets-dir", "/etc/x"],
            &["sort", "-k", "2"],
            // A flag after a secret flag is no value: nothing to hide in it.
            &["x", "--auth", "--verbose"],
        ] {
            check(line, line);
        }
    }

    #[test]
    fn secret_environment_words_and_headers() {
        check(
            &[
                "env",
                "PGPASSWORD=hunter2",
                "GITHUB_TOKEN=ghp_x",
                "HOME=/root",
                "psql",
            ],
            &[
                "env",
                "PGPASSWORD=[redacted]",
                "GITHUB_TOKEN=[redacted]",
                "HOME=/root",
                "psql",
            ],
        );
        check(
            &[
                "curl",
                "-H",
                "Authorization: Bearer abc.def",
                "-H",
                "Accept: */*",
            ],
            &[
                "curl",
                "-H",
                "Authorization: [redacted]",
                "-H",
                "Accept: */*",
            ],
        );
        check(
            &["curl", "-H", "X-Api-Key:abc", "https://example.com"],
            &["curl", "-H", "X-Api-Key:[redacted]", "https://example.com"],
        );
        // A host and port, a path: no header.
        check(
            &["x", "token:/etc/t", "key:"],
            &["x", "token:/etc/t", "key:"],
        );
    }

    #[test]
    fn urls_lose_their_passwords_and_secret_parameters() {
        check(
            &[
                "./app",
                "--db=postgres://app:hunter2@db:5432/main?sslmode=require",
            ],
            &[
                "./app",
                "--db=postgres://app:[redacted]@db:5432/main?sslmode=require",
            ],
        );
        check(
            &[
                "curl",
                "https://example.com/x?user=a&access_token=abc&page=2#top",
            ],
            &[
                "curl",
                "https://example.com/x?user=a&access_token=[redacted]&page=2#top",
            ],
        );
        // A user alone, an address with no user: nothing to hide.
        check(
            &[
                "git",
                "clone",
                "ssh://git@example.com/x.git",
                "http://[::1]:80/",
            ],
            &[
                "git",
                "clone",
                "ssh://git@example.com/x.git",
                "http://[::1]:80/",
            ],
        );
    }

    #[test]
    fn an_argument_with_spaces_is_read_as_words() {
        check(
            &[
                "sh",
                "-c",
                "exec ./server --password hunter2 --port 80",
                "--token=t",
            ],
            &[
                "sh",
                "-c",
                "exec ./server --password [redacted] --port 80",
                "--token=[redacted]",
            ],
        );
        check(
            &[
                "sh",
                "-c",
                "./server --password='hunter2' && curl redis://:pw@h:6379",
            ],
            &[
                "sh",
                "-c",
                "./server --password='[redacted]' && curl redis://:[redacted]@h:6379",
            ],
        );
        check(
            &["postgres: host=db password=hunter2 dbname=main"],
            &["postgres: host=db password=[redacted] dbname=main"],
        );
        check(
            &[
                "sh",
                "-c",
                "curl -H 'Authorization: Bearer abc' -H \"X-Token:\" t2 https://h/",
            ],
            &[
                "sh",
                "-c",
                "curl -H 'Authorization: Bearer [redacted]' -H \"X-Token:\" [redacted] https://h/",
            ],
        );
        // Spacing is kept.
        check(&["a  --key\tk  b"], &["a  --key\t[redacted]  b"]);
    }

    #[test]
    fn the_example_in_docs_record_md() {
        check(
            &[
                "./server",
                "--password=hunter2",
                "-db-token",
                "t0k",
                "--db",
                "postgres://app:pw@db/main",
                "PGPASSWORD=x",
            ],
            &[
                "./server",
                "--password=[redacted]",
                "-db-token",
                "[redacted]",
                "--db",
                "postgres://app:[redacted]@db/main",
                "PGPASSWORD=[redacted]",
            ],
        );
    }

    #[test]
    fn a_line_without_secrets_is_unchanged() {
        let line = [
            "./server",
            "--port",
            "9000",
            "-v",
            "http://host/x",
            "--",
            "a=b",
        ];
        check(&line, &line);
        check(&[], &[]);
        check(&["--password"], &["--password"]);
    }
}
