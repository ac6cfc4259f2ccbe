//! Index ops: index_select, gather, take_along_axis, one_hot, embedding lookup.
