//! The flags of the lines that are modules of their own ([`crate::lines`]): [`LineArgs`], one
//! group a line, declared by the line's module and listed in `lines/mod.rs`, flattened
//! into `run` and `judge` alike; [`LineArgs::over`] lays each over the line's recorded
//! settings, as [`crate::args::judged::Judged::over`] does the others.

use crate::archive::record::LineFloors;

/// Each line module's flags, and where each lands in its recorded settings.
macro_rules! line_args {
    ($($module:ident: $check:ident after $after:ident {
        floors: $key:ident $floors:ident, figures: $figures:ident, flags: $flags:ident
    };)*) => {
        /// Each line module's flags, one group a line, named by its module.
        #[derive(Debug, Clone, Default, clap::Args)]
        pub struct LineArgs {
            $(
                #[doc = concat!("The ", stringify!($module), " line's flags.")]
                #[command(flatten)]
                pub $module: crate::lines::$module::$flags,
            )*
        }

        impl LineArgs {
            /// Lay each line's given flags over its recorded settings (the defaults, or a
            /// run's): each given wins, each not given leaves what was there.
            pub fn over(&self, mut floors: LineFloors) -> LineFloors {
                $(floors.$key = self.$module.over(std::mem::take(&mut floors.$key));)*
                floors
            }
        }
    };
}
crate::lines::every_line!(line_args);
