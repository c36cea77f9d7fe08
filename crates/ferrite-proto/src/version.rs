//! The client version Ferrite reports, and how it names itself.
//!
//! Servers and apps see one BOINC version from a client: in scheduler requests, upload
//! headers, `init_data.xml`, reported results' `<stderr_out>`, the HTTP User-Agent and GUI RPC
//! `exchange_versions`. Projects refuse clients below their `min_core_client_version` and
//! plan classes compare it, so Ferrite reports the BOINC release line whose protocol it
//! speaks, [`PROTOCOL_VERSION`], never the version written in an old state file. It names
//! itself where the protocol leaves room for a brand: `<client_brand>` in scheduler requests
//! and the parenthesised part of the User-Agent ([`BRAND`]).

use crate::client_state::ClientVersion;

/// The BOINC client version whose protocol Ferrite implements (the 8.2 line).
pub const PROTOCOL_VERSION: ClientVersion = ClientVersion {
    major: 8,
    minor: 2,
    release: 0,
};

/// Ferrite's own name and version, e.g. `Ferrite 0.1.0`.
pub const BRAND: &str = concat!("Ferrite ", env!("CARGO_PKG_VERSION"));

impl std::fmt::Display for ClientVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_version_is_a_real_8_x_release_and_the_brand_names_ferrite() {
        assert_eq!(PROTOCOL_VERSION.to_string(), "8.2.0");
        assert!(
            PROTOCOL_VERSION
                > ClientVersion {
                    major: 7,
                    minor: 20,
                    release: 5
                }
        );
        assert!(BRAND.starts_with("Ferrite ") && BRAND.len() > "Ferrite ".len());
    }
}
