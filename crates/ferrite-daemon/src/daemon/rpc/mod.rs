//! GUI RPC's glue: the commands (`commands.rs`), each applied by handing the change to the
//! part that owns it. The server, the router and the replies are `rpc/`.

mod commands;
