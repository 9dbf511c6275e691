//! placeholder for the delete-mode policy
