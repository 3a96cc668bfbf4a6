"""`bsjax gilp ...`: the commands of the graph-planning domain (`main.add_parser`)."""
