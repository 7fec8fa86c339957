from channels.auth import AuthMiddlewareStack
from django.urls import path, re_path

from supportdesk.consumers import AgentInboxConsumer, ConversationConsumer, UnknownSocketPath

websocket_urlpatterns = [
    path("ws/conversations/<uuid:public_id>/", ConversationConsumer.as_asgi()),
    # The agent inbox's live updates (issue #29): the staff session, not a conversation token.
    path("ws/agent/inbox/", AuthMiddlewareStack(AgentInboxConsumer.as_asgi())),
    re_path(r"", UnknownSocketPath.as_asgi()),  # anything else is refused, not a server error
]
