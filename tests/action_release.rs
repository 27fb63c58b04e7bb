//! The Action on a released, checksum-verified binary (issue 38, item 3).
