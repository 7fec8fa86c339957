from django.urls import path, re_path

from supportdesk.consumers import ConversationConsumer, UnknownSocketPath

websocket_urlpatterns = [
    path("ws/conversations/<uuid:public_id>/", ConversationConsumer.as_asgi()),
    re_path(r"", UnknownSocketPath.as_asgi()),  # anything else is refused, not a server error
]
