"""The read side: statistics, exports, the plan-record inspector, the staff dashboard, the analyst API
and the routing evaluation. It sits above the domain apps (``supportdesk``, ``sgr``, ``guard``,
``retrieval``) and imports the models it reads; no domain app imports it."""
