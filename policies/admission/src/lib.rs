//! placeholder for the admission policy
