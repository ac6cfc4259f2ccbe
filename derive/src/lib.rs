//! `#[derive(Layer)]` for dygraph models: a model is a plain struct whose fields are its
//! sublayers. The derive writes the visitors that `dygraph::nn::Layer` builds
//! `parameters()`, `named_parameters()` ("linear1.weight"), `sublayers()`, `train()`/`eval()`,
//! `state_dict()` and `to(place)` from.
//!
//! Field attributes:
//! - none: the field is a sublayer (any type implementing `Layer`, including `Option<L>` and
//!   `Vec<L>`);
//! - `#[layer(param)]`: a `Tensor` (or `Option<Tensor>`) parameter of this layer;
//! - `#[layer(buffer)]`: a `Tensor` (or `Option<Tensor>`) saved in the state dict but not
//!   trained;
//! - `name = "..."` beside `param` or `buffer`: the key in `named_parameters()` and the state
//!   dict, where it differs from the field's name (`#[layer(buffer, name = "_mean")]`);
//! - `#[layer(training)]`: a `bool` that holds this layer's train/eval mode (`set_training`
//!   sets it and every sublayer's);
//! - `#[layer(skip)]`: anything else (hyper-parameters, caches).
//!
//! `#[derive(Attrs)]` (inside dygraph) converts an op's attribute struct to and from the flat
//! attribute map: each named field is one attribute of the same name.

use proc_macro::TokenStream;
use quote::quote;
use syn::{Data, DeriveInput, Fields, parse_macro_input};

#[derive(PartialEq)]
enum Role {
    Sublayer,
    Param,
    Buffer,
    Training,
    Skip,
}

/// A field's role and its key (the field's name unless `name = "..."` says otherwise).
fn role(field: &syn::Field) -> syn::Result<(Role, Option<String>)> {
    let (mut role, mut key) = (Role::Sublayer, None);
    for attr in &field.attrs {
        if !attr.path().is_ident("layer") {
            continue;
        }
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("name") {
                key = Some(meta.value()?.parse::<syn::LitStr>()?.value());
                return Ok(());
            }
            role = if meta.path.is_ident("param") {
                Role::Param
            } else if meta.path.is_ident("buffer") {
                Role::Buffer
            } else if meta.path.is_ident("training") {
                Role::Training
            } else if meta.path.is_ident("skip") {
                Role::Skip
            } else {
                return Err(meta.error("expected `param`, `buffer`, `training`, `skip` or `name = \"...\"`"));
            };
            Ok(())
        })?;
    }
    Ok((role, key))
}

/// True when the field's type is `Option<...>`.
fn is_option(ty: &syn::Type) -> bool {
    matches!(ty, syn::Type::Path(p) if p.path.segments.last().is_some_and(|s| s.ident == "Option"))
}

/// Implements `dygraph::nn::Layer` for a struct with named fields.
#[proc_macro_derive(Layer, attributes(layer))]
pub fn derive_layer(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(name, "#[derive(Layer)] needs a struct"));
    };
    let Fields::Named(fields) = &data.fields else {
        return Err(syn::Error::new_spanned(name, "#[derive(Layer)] needs named fields"));
    };
    let (mut params, mut buffers, mut subs, mut training) = (Vec::new(), Vec::new(), Vec::new(), None);
    for f in &fields.named {
        let ident = f.ident.as_ref().expect("named field");
        let (role, key) = role(f)?;
        let entry = (ident, key.unwrap_or_else(|| ident.to_string()), is_option(&f.ty));
        match role {
            Role::Param => params.push(entry),
            Role::Buffer => buffers.push(entry),
            Role::Sublayer => subs.push((ident, entry.1, false)),
            Role::Training => training = Some(ident),
            Role::Skip => {}
        }
    }
    let visit = |list: &[(&syn::Ident, String, bool)], mutable: bool| {
        let calls = list.iter().map(|(ident, key, optional)| {
            let field = if mutable {
                quote! { &mut self.#ident }
            } else {
                quote! { &self.#ident }
            };
            if *optional {
                quote! { if let Some(t) = #field { f(#key, t); } }
            } else {
                quote! { f(#key, #field); }
            }
        });
        quote! { #(#calls)* }
    };
    let mode = training.map(|flag| {
        quote! {
            fn is_training(&self) -> bool {
                self.#flag
            }
            fn set_training(&mut self, training: bool) {
                self.#flag = training;
                self.visit_sublayers_mut(&mut |_, l| l.set_training(training));
            }
        }
    });
    let (p, pm) = (visit(&params, false), visit(&params, true));
    let (b, bm) = (visit(&buffers, false), visit(&buffers, true));
    let (s, sm) = (visit(&subs, false), visit(&subs, true));
    Ok(quote! {
        impl #impl_generics ::dygraph::nn::Layer for #name #ty_generics #where_clause {
            fn visit_parameters<'dygraph_a>(&'dygraph_a self, f: &mut dyn FnMut(&str, &'dygraph_a ::dygraph::Tensor)) {
                #p
            }
            fn visit_parameters_mut(&mut self, f: &mut dyn FnMut(&str, &mut ::dygraph::Tensor)) {
                #pm
            }
            fn visit_buffers<'dygraph_a>(&'dygraph_a self, f: &mut dyn FnMut(&str, &'dygraph_a ::dygraph::Tensor)) {
                #b
            }
            fn visit_buffers_mut(&mut self, f: &mut dyn FnMut(&str, &mut ::dygraph::Tensor)) {
                #bm
            }
            fn visit_sublayers<'dygraph_a>(&'dygraph_a self, f: &mut dyn FnMut(&str, &'dygraph_a dyn ::dygraph::nn::Layer)) {
                #s
            }
            fn visit_sublayers_mut(&mut self, f: &mut dyn FnMut(&str, &mut dyn ::dygraph::nn::Layer)) {
                #sm
            }
            #mode
        }
    })
}

/// Implements `dygraph::ops::Attrs` for a struct with named fields, each an `AttrField`.
#[proc_macro_derive(Attrs)]
pub fn derive_attrs(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    match expand_attrs(&input) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand_attrs(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    let name = &input.ident;
    let Data::Struct(data) = &input.data else {
        return Err(syn::Error::new_spanned(name, "#[derive(Attrs)] needs a struct"));
    };
    let idents: Vec<&syn::Ident> = match &data.fields {
        Fields::Named(f) => f.named.iter().map(|f| f.ident.as_ref().expect("named field")).collect(),
        Fields::Unit => Vec::new(),
        Fields::Unnamed(_) => return Err(syn::Error::new_spanned(name, "#[derive(Attrs)] needs named fields")),
    };
    let keys: Vec<String> = idents.iter().map(|i| i.to_string()).collect();
    Ok(quote! {
        impl ::dygraph::ops::Attrs for #name {
            fn to_map(&self) -> ::dygraph::ops::AttrMap {
                let mut m = ::dygraph::ops::AttrMap::new();
                #( m.set(#keys, ::dygraph::ops::AttrField::to_attr(&self.#idents)); )*
                m
            }
            fn from_map(op: &'static str, map: &::dygraph::ops::AttrMap) -> ::dygraph::Result<Self> {
                map.check_known(op, &[#(#keys),*])?;
                Ok(#name { #( #idents: map.field(op, #keys)?, )* })
            }
        }
    })
}
