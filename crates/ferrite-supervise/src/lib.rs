//! Running science apps.
