//! `setters!`: the builder methods of option structs (`Conv2dOptions::new().stride(2)`),
//! one line each instead of a five-line method.

/// Builder methods `name(mut self, value) -> Self`, each setting the field of its name:
/// - `name: T;` stores `value.into()` (so `T` may be `impl Into<U>`);
/// - `name: T => Some;` stores `Some(value.into())`;
/// - `kind: ...` before the list sets fields of `self.kind` (the optimizers' settings), and
///   `kind.field: ...` fields of `self.kind.field`.
macro_rules! setters {
    (kind.$field:ident: $($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.kind.$field.$name = value;
                self
            }
        )*
    };
    (kind: $($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.kind.$name = value;
                self
            }
        )*
    };
    ($($(#[$doc:meta])* $name:ident: $ty:ty $(=> $wrap:ident)?;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.$name = $($wrap)?(value.into());
                self
            }
        )*
    };
}
