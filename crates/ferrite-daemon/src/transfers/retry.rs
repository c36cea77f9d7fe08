//! A transfer's retry record, kept in the state file in the official layout.

/// The persistent part of a transfer (`<persistent_file_xfer>`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Retry {
    pub(super) num_retries: u32,
    pub(super) first_request_time: f64,
    pub(super) next_request_time: f64,
    pub(super) time_so_far: f64,
    pub(super) last_bytes_xferred: f64,
    pub(super) is_upload: bool,
}

impl Retry {
    pub(super) fn parse(text: &str) -> Retry {
        let num = |tag: &str| -> f64 {
            let open = format!("<{tag}>");
            let close = format!("</{tag}>");
            text.find(&open)
                .and_then(|i| {
                    let rest = &text[i + open.len()..];
                    rest.find(&close).map(|j| rest[..j].trim())
                })
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
        };
        Retry {
            num_retries: num("num_retries").clamp(0.0, 1e6) as u32,
            first_request_time: num("first_request_time"),
            next_request_time: num("next_request_time"),
            time_so_far: num("time_so_far"),
            last_bytes_xferred: num("last_bytes_xferred"),
            is_upload: num("is_upload") != 0.0,
        }
    }

    pub(super) fn to_xml(&self) -> String {
        format!(
            "<persistent_file_xfer>\n        <num_retries>{}</num_retries>\n        <first_request_time>{:.6}</first_request_time>\n        <next_request_time>{:.6}</next_request_time>\n        <time_so_far>{:.6}</time_so_far>\n        <last_bytes_xferred>{:.6}</last_bytes_xferred>\n        <is_upload>{}</is_upload>\n    </persistent_file_xfer>",
            self.num_retries,
            self.first_request_time,
            self.next_request_time,
            self.time_so_far,
            self.last_bytes_xferred,
            u8::from(self.is_upload)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_state_round_trips_in_the_official_layout() {
        let r = Retry {
            num_retries: 3,
            first_request_time: 1000.5,
            next_request_time: 2000.0,
            time_so_far: 12.25,
            last_bytes_xferred: 4096.0,
            is_upload: true,
        };
        let x = r.to_xml();
        assert!(x.starts_with("<persistent_file_xfer>\n        <num_retries>3</num_retries>"));
        assert_eq!(Retry::parse(&x), r);
        assert_eq!(
            Retry::parse("<persistent_file_xfer><num_retries>x</num_retries>"),
            Retry::default()
        );
    }
}
