//! The release workflow and the tarballs it makes (issue 38, item 2).
