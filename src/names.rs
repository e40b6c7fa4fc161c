//! Session names: the one rule every way in checks them by (the API, import, the hooks).

/// Longest accepted session name, in bytes.
pub const MAX_SESSION_NAME_BYTES: usize = 256;

/// Why `name` cannot be a session name, or `None` if it can. Import checks the names it reads
/// from a log with it too, so a bad one is reported at its line.
pub(crate) fn session_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_SESSION_NAME_BYTES {
        Some(format!("it is {} bytes, over the limit of {MAX_SESSION_NAME_BYTES}", name.len()))
    } else if name.chars().any(char::is_control) {
        Some("it contains control characters".to_string())
    } else if name.trim() != name {
        Some("it starts or ends with whitespace".to_string())
    } else {
        None
    }
}
