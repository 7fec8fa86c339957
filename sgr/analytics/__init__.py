"""Analyst reads of plan records: filters, streamed exports and statistics (no conversation-domain services)."""
