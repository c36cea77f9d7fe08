//! A generator of large, realistic state files, for benchmarks (the state-file bench here
//! and the daemon's store bench).

use super::{
    App, AppVersion, ClientState, ClientVersion, FileInfo, FileRef, Project, ProjectState,
    ResourceUsage, ResultState, RunMode, TaskResult, Workunit,
};
use crate::account::{account_file_name, AccountFile};
use crate::host::HostInfo;

/// A state with `projects` projects sharing `tasks` tasks between them. Each task has a
/// workunit, a result, one or two input files and one output file; each project has one app
/// with three app versions. Deterministic.
pub fn synthetic(projects: usize, tasks: usize) -> ClientState {
    let mut cs = ClientState {
        host_info: HostInfo {
            host_cpid: "0123456789abcdef0123456789abcdef".into(),
            p_ncpus: 16,
            p_vendor: "GenuineIntel".into(),
            p_model: "Intel(R) Xeon(R) Processor".into(),
            p_features: "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr sse sse2 avx2".into(),
            p_fpops: 4.9e9,
            p_iops: 8.4e10,
            p_membw: 1e9,
            p_calculated: 1.7e9,
            m_nbytes: 3.2e10,
            m_cache: 3e8,
            d_total: 2.7e11,
            d_free: 8.2e10,
            os_name: "Linux Debian".into(),
            os_version: "Debian GNU/Linux 12 (bookworm)".into(),
            ..HostInfo::default()
        },
        platform_name: "x86_64-pc-linux-gnu".into(),
        core_client_version: ClientVersion {
            major: 8,
            minor: 2,
            release: 0,
        },
        user_run_request: RunMode::Auto,
        user_run_prev_request: RunMode::Auto,
        user_gpu_request: RunMode::Auto,
        user_gpu_prev_request: RunMode::Auto,
        user_network_request: RunMode::Auto,
        ..ClientState::default()
    };
    let platform = "x86_64-pc-linux-gnu";
    for p in 0..projects {
        let url = format!("http://127.0.0.1:9/project{p}/");
        let app_name = format!("app{p}");
        let mut ps = ProjectState {
            project: Project {
                master_url: url.clone(),
                project_name: format!("Project {p}"),
                user_name: "user".into(),
                hostid: 1000 + p as i32,
                userid: 7,
                rpc_seqno: 42,
                rec: 1234.5,
                rec_time: 1.7e9,
                scheduler_urls: vec![format!("http://127.0.0.1:9/project{p}/cgi")],
                ..Project::default()
            },
            apps: vec![App {
                name: app_name.clone(),
                user_friendly_name: format!("Application {p}"),
                ..App::default()
            }],
            ..ProjectState::default()
        };
        for v in 0..3 {
            let exe = format!("{app_name}_{}.{:02}_{platform}", 1 + v / 100, v);
            ps.files.push(FileInfo {
                name: exe.clone(),
                nbytes: 3_156_880.0,
                md5_cksum: "e28157c92a1ca0fe0653c0aaa34eb874".into(),
                status: 1,
                executable: true,
                signature_required: true,
                file_signature: Some(format!("{:0128x}\n.", p * 7 + v)),
                download_urls: vec![format!("{url}download/{exe}")],
                ..FileInfo::default()
            });
            ps.app_versions.push(AppVersion {
                app_name: app_name.clone(),
                version_num: 100 + v as i32,
                platform: platform.into(),
                api_version: "8.0.0".into(),
                file_refs: vec![FileRef {
                    file_name: exe,
                    main_program: true,
                    ..FileRef::default()
                }],
                usage: ResourceUsage {
                    avg_ncpus: 1.0,
                    flops: 4.9e9,
                    ..ResourceUsage::default()
                },
                ..AppVersion::default()
            });
        }
        cs.projects.push(ps);
    }
    for t in 0..tasks {
        let p = t % projects.max(1);
        let Some(ps) = cs.projects.get_mut(p) else {
            break;
        };
        let url = ps.project.master_url.clone();
        let app_name = ps.apps[0].name.clone();
        let wu_name = format!("wu_{app_name}_{t:08}_{:x}", t.wrapping_mul(2654435761));
        let n_inputs = 1 + t % 2;
        let mut inputs = Vec::new();
        for i in 0..n_inputs {
            let name = format!("{wu_name}_in{i}");
            ps.files.push(FileInfo {
                name: name.clone(),
                nbytes: 1_000_000.0 + t as f64,
                md5_cksum: format!("{:032x}", t * 31 + i),
                status: 1,
                download_urls: vec![format!("{url}download/{name}")],
                ..FileInfo::default()
            });
            inputs.push(FileRef {
                file_name: name,
                open_name: format!("in{i}"),
                ..FileRef::default()
            });
        }
        let res_name = format!("{wu_name}_0");
        let out = format!("{res_name}_r{}_0", t * 7919);
        ps.files.push(FileInfo {
            name: out.clone(),
            max_nbytes: 5_000_000.0,
            upload_urls: vec![format!("{url}cgi/file_upload_handler")],
            xml_signature: Some(format!("{:0128x}\n.", t)),
            ..FileInfo::default()
        });
        ps.workunits.push(Workunit {
            name: wu_name.clone(),
            app_name,
            version_num: 102,
            rsc_fpops_est: 3.6e13,
            rsc_fpops_bound: 3.6e15,
            rsc_memory_bound: 5e8,
            rsc_disk_bound: 1e9,
            command_line: "-cpu_time 3600".into(),
            input_files: inputs,
            ..Workunit::default()
        });
        let done = t % 10 == 0;
        ps.results.push(TaskResult {
            name: res_name,
            wu_name,
            platform: platform.into(),
            version_num: 102,
            state: if done {
                ResultState::FilesUploaded
            } else {
                ResultState::FilesDownloaded
            },
            final_cpu_time: if done { 3590.5 } else { 0.0 },
            final_elapsed_time: if done { 3600.25 } else { 0.0 },
            ready_to_report: done,
            completed_time: if done { 1.7e9 + t as f64 } else { 0.0 },
            stderr_out: if done {
                "<stderr_txt>\napp started\ncalled boinc_finish(0)\n</stderr_txt>".into()
            } else {
                String::new()
            },
            report_deadline: 1.7e9 + 604_800.0,
            received_time: 1.7e9 + t as f64,
            output_files: vec![FileRef {
                file_name: out,
                open_name: "out".into(),
                ..FileRef::default()
            }],
            ..TaskResult::default()
        });
    }
    cs
}

/// The account file a data directory made of [`synthetic`] needs for project `master_url`
/// (a client drops a project that has none, and every task with it): its file name and
/// contents, written by [`AccountFile`].
pub fn synthetic_account(master_url: &str) -> (String, String) {
    let account = AccountFile {
        master_url: master_url.to_owned(),
        authenticator: "0123456789abcdef0123456789abcdef".into(),
        ..AccountFile::default()
    };
    (account_file_name(master_url), account.to_xml())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_account_file_reads_back_as_its_project() {
        let state = synthetic(2, 4);
        let url = &state.projects[1].project.master_url;
        let (name, xml) = synthetic_account(url);
        assert_eq!(name, account_file_name(url));
        let back = AccountFile::parse(&xml, &name)
            .expect("an account file")
            .value;
        assert_eq!(&back.master_url, url);
        assert_eq!(back.authenticator.len(), 32);
    }
}
