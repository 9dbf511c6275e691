//! placeholder for the scope policy
