//! Edits of `global_prefs_override.xml` made on a user's behalf (`ferrite prefs limits`):
//! some preference elements get new values, everything else the file holds (other
//! preferences, `<day_prefs>`, `<host_venue>`) is kept as written.

use crate::prefs::GlobalPrefs;
use crate::xml::{XmlError, XmlReader, XmlWriter};

/// The override document `current` (empty: no override file yet) with each `(element,
/// value)` of `values` set: an element already there is replaced, a new one is appended.
/// The result is checked by parsing it as the daemon will.
pub fn set_override_numbers(current: &str, values: &[(&str, f64)]) -> Result<String, XmlError> {
    let mut w = XmlWriter::new();
    w.open("global_preferences");
    if !current.trim().is_empty() {
        let mut r = XmlReader::new(current, "global_prefs_override.xml");
        let root = r.root("global_preferences")?;
        if !root.is_empty() {
            while let Some(tag) = r.next_child()? {
                let raw = r.raw(&tag)?;
                if !values.iter().any(|(name, _)| *name == tag.name()) {
                    w.raw(raw);
                }
            }
        }
        r.finish()?;
    }
    for (name, value) in values {
        w.f64(name, *value);
    }
    w.close("global_preferences");
    let text = w.finish();
    GlobalPrefs::default().apply_override(&text, "global_prefs_override.xml", f64::INFINITY)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_new_and_replaces_old_values_keeping_the_rest() {
        let current = "<global_preferences>\n   <cpu_usage_limit>50.000000</cpu_usage_limit>\n   \
                       <ferrite_cpu_temp_limit>90</ferrite_cpu_temp_limit>\n   <day_prefs>\n      \
                       <day_of_week>1</day_of_week>\n      <start_hour>8.00</start_hour>\n      \
                       <end_hour>17.00</end_hour>\n   </day_prefs>\n</global_preferences>\n";
        let out = set_override_numbers(
            current,
            &[
                ("ferrite_cpu_temp_limit", 80.0),
                ("ferrite_gpu_temp_limit", 85.0),
            ],
        )
        .expect("edited");
        let mut p = GlobalPrefs::default();
        let info = p.apply_override(&out, "o", 0.0).expect("parses").value;
        assert_eq!(p.ferrite_cpu_temp_limit, 80.0);
        assert_eq!(p.ferrite_gpu_temp_limit, 85.0);
        assert_eq!(p.cpu_usage_limit, 50.0);
        assert!(info.present.contains("cpu_usage_limit"));
        assert!(p.cpu_times.week[1].is_some(), "day_prefs kept: {out}");
        assert_eq!(out.matches("ferrite_cpu_temp_limit>").count(), 2, "{out}");
    }

    #[test]
    fn starts_from_nothing_and_rejects_other_documents() {
        let out = set_override_numbers("", &[("ferrite_gpu_temp_limit", 0.0)]).expect("new");
        assert_eq!(
            out,
            "<global_preferences>\n    <ferrite_gpu_temp_limit>0.000000</ferrite_gpu_temp_limit>\n</global_preferences>\n"
        );
        assert!(set_override_numbers("<cc_config/>", &[("ferrite_gpu_temp_limit", 1.0)]).is_err());
        assert!(set_override_numbers("<global_preferences>", &[]).is_err());
    }
}
