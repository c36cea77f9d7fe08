use super::*;

type ReadAll = (Vec<(String, String)>, Vec<Warning>);

fn read_all(src: &str) -> Result<ReadAll, XmlError> {
    let mut r = XmlReader::new(src, "t.xml");
    r.root("doc")?;
    let mut out = Vec::new();
    while let Some(tag) = r.next_child()? {
        match tag.name() {
            "keep" => {
                let raw = r.keep_unknown(&tag, "doc")?.unwrap_or_default();
                out.push(("keep".into(), raw));
            }
            "num" => {
                let v: Option<f64> = r.num(&tag)?;
                out.push(("num".into(), format!("{v:?}")));
            }
            "int" => {
                let v = r.num_clamped::<i32>(&tag, 0, 10)?;
                out.push(("int".into(), format!("{v:?}")));
            }
            "flag" => {
                let v = r.flag(&tag)?;
                out.push(("flag".into(), v.to_string()));
            }
            "s" => {
                let v = r.string(&tag)?;
                out.push(("s".into(), v));
            }
            _ => r.unknown(&tag, "doc")?,
        }
    }
    let w = r.finish()?;
    Ok((out, w))
}

#[test]
fn values_flags_and_unknowns() {
    let src = "<?xml version=\"1.0\"?>\n<doc>\n  <num> 1.5 </num>\n  <int>3.000000</int>\n  <int>42</int>\n  <flag/>\n  <flag>0</flag>\n  <s>a &amp; b</s>\n  <s><![CDATA[x < y]]></s>\n  <future><a>1</a></future>\n  <keep><z/>t</keep>\n</doc>\n";
    let (vals, warns) = read_all(src).expect("reads");
    let got: Vec<String> = vals.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(
        got,
        [
            "num=Some(1.5)",
            "int=Some(3)",
            "int=Some(10)",
            "flag=true",
            "flag=false",
            "s=a & b",
            "s=x < y",
            "keep=<keep><z/>t</keep>",
        ]
    );
    let msgs: Vec<String> = warns.iter().map(ToString::to_string).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(
        msgs[0].starts_with("t.xml:5: <int>: 42 is out of range"),
        "{msgs:?}"
    );
    assert!(
        msgs[1].starts_with("t.xml:10: <future>: unknown element"),
        "{msgs:?}"
    );
    assert!(
        msgs[2].starts_with("t.xml:11: <keep>: unknown element"),
        "{msgs:?}"
    );
}

#[test]
fn bad_number_is_a_warning_not_an_error() {
    let (vals, warns) = read_all("<doc><num>fast</num><num>nan</num></doc>").expect("reads");
    assert_eq!(vals[0].1, "None");
    assert_eq!(vals[1].1, "None");
    assert_eq!(warns.len(), 2);
    assert!(warns[0].message.contains("'fast' is not a number"));
}

#[test]
fn truncated_document_names_the_open_element() {
    let err = read_all("<doc>\n<s>abc</s>\n<num>1").expect_err("truncated");
    match err {
        XmlError::Truncated { element, line, .. } => {
            assert_eq!(element, "num");
            assert_eq!(line, 3);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn mismatched_tags_are_malformed_with_line() {
    let err = read_all("<doc>\n<s>abc</t>\n</doc>").expect_err("malformed");
    match err {
        XmlError::Malformed { line, .. } => assert_eq!(line, 2),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn wrong_root_is_an_error() {
    let err = read_all("<other/>").expect_err("wrong root");
    assert!(err.to_string().contains("expected <doc>"), "{err}");
}

#[test]
fn huge_unknown_element_is_dropped_and_huge_text_cut() {
    let big = "x".repeat(MAX_TEXT_LEN + 10);
    let src = format!("<doc><keep>{big}</keep><s>{big}</s><num>2</num></doc>");
    let (vals, warns) = read_all(&src).expect("reads");
    assert_eq!(vals[0].1, "", "unknown element over the limit is not kept");
    assert_eq!(vals[1].1.len(), MAX_TEXT_LEN);
    assert_eq!(vals[2].1, "Some(2.0)");
    assert!(warns.iter().any(|w| w.message.contains("dropped")));
    assert!(warns.iter().any(|w| w.message.contains("cut")));
}

#[test]
fn writer_layout_and_escaping() {
    let mut w = XmlWriter::new();
    w.open("project")
        .text("master_url", "http://a/?x=1&y=<2>")
        .f64("rec", 0.5)
        .num("hostid", 7)
        .flag("dont_use_dcf", true)
        .flag("ended", false)
        .cdata("stderr_out", "a]]>b")
        .close("project");
    let s = w.finish();
    assert_eq!(
        s,
        "<project>\n    <master_url>http://a/?x=1&amp;y=&lt;2&gt;</master_url>\n    <rec>0.500000</rec>\n    <hostid>7</hostid>\n    <dont_use_dcf/>\n    <stderr_out>\n<![CDATA[\na]]]]><![CDATA[>b\n]]>\n    </stderr_out>\n</project>\n"
    );
    // What we write reads back to the same values.
    let mut r = XmlReader::new(&s, "w.xml");
    r.root("project").expect("root");
    let mut seen = Vec::new();
    while let Some(tag) = r.next_child().expect("child") {
        let v = match tag.name() {
            "dont_use_dcf" => r.flag(&tag).expect("flag").to_string(),
            "stderr_out" => r.text(&tag).expect("text").trim().to_owned(),
            _ => r.string(&tag).expect("string"),
        };
        seen.push(v);
    }
    assert_eq!(
        seen,
        ["http://a/?x=1&y=<2>", "0.500000", "7", "true", "a]]>b"]
    );
}

#[test]
fn escape_covers_element_content_and_borrows_plain_text() {
    assert_eq!(escape("a<b>&c \"'"), "a&lt;b&gt;&amp;c \"'");
    assert!(matches!(escape("plain text"), Cow::Borrowed(_)));
}

#[test]
fn unescape_decodes_entities_and_keeps_what_is_not_one() {
    assert_eq!(
        unescape("&lt;a&gt; &amp;amp; &quot;&apos; &#65;&#x42;"),
        "<a> &amp; \"' AB"
    );
    // A bare `&`, an unknown entity and a reference to no character stay as they are.
    assert_eq!(
        unescape("http://x/?a=1&b=2&amp;c=3 &nbsp; &#xD800; &"),
        "http://x/?a=1&b=2&c=3 &nbsp; &#xD800; &"
    );
    assert!(matches!(unescape("no entity"), Cow::Borrowed(_)));
    // What `escape` writes, `unescape` reads back.
    let text = "<tag> & \"quoted\" 'é'";
    assert_eq!(unescape(&escape(text)), text);
}
