//! The Debian package (issue 38, item 1).
